// expand_device_list (strider/devices.h): the device lists `strider serve --device` takes.
#include <gtest/gtest.h>

#include "hal/device_list.h"

namespace strider {
namespace {

using Devices = std::vector<std::string>;

Result<Devices> expand(std::string_view spec, int gpus) {
  return expand_device_list(spec, [gpus]() -> Result<int> { return gpus; });
}

// The devices, or the error as the one element (so a wrong refusal fails the comparison).
Devices expanded(std::string_view spec, int gpus) {
  Result<Devices> devices = expand(spec, gpus);
  return devices.is_ok() ? *devices : Devices{"error: " + devices.status().to_string()};
}

TEST(DeviceList, NamesOrdinalsAndEveryGpu) {
  EXPECT_EQ(expanded("cpu", 0), Devices{"cpu"});
  EXPECT_EQ(expanded("cuda", 2), Devices{"cuda:0"});
  EXPECT_EQ(expanded("cuda:1", 0), Devices{"cuda:1"});  // not checked here: the session says so
  EXPECT_EQ(expanded("cuda:0,1", 2), (Devices{"cuda:0", "cuda:1"}));
  EXPECT_EQ(expanded("cuda:2,0,3", 4), (Devices{"cuda:2", "cuda:0", "cuda:3"}));
  EXPECT_EQ(expanded("cuda:0,cuda:1", 2), (Devices{"cuda:0", "cuda:1"}));
  EXPECT_EQ(expanded("cuda:all", 3), (Devices{"cuda:0", "cuda:1", "cuda:2"}));
  EXPECT_EQ(expanded("cpu,sim", 0), (Devices{"cpu", "sim"}));
}

TEST(DeviceList, RefusesWhatNamesNoDeviceOrOneTwice) {
  for (const char* spec : {"", "gpu", "cuda:", "cuda:-1", "cuda:x", "cpu,", "1", "cpu,1", "cuda:0,,1", "cuda:0,1x"}) {
    Result<Devices> devices = expand(spec, 2);
    EXPECT_EQ(devices.status().code(), StatusCode::kInvalidArgument) << "'" << spec << "'";
  }
  for (const char* spec : {"cuda:0,0", "cuda:all,cuda:1", "cpu,cpu", "cuda,cuda:0"}) {
    Result<Devices> devices = expand(spec, 2);
    ASSERT_FALSE(devices.is_ok()) << spec;
    EXPECT_NE(devices.status().message().find("twice"), std::string::npos) << devices.status().to_string();
  }
}

TEST(DeviceList, EveryGpuWhereThereIsNoneIsADeviceError) {
  EXPECT_EQ(expand("cuda:all", 0).status().code(), StatusCode::kDeviceError);
  auto no_cuda = expand_device_list("cuda:all", []() -> Result<int> { return device_error("no CUDA backend"); });
  EXPECT_EQ(no_cuda.status().code(), StatusCode::kDeviceError);
  EXPECT_NE(no_cuda.status().message().find("no CUDA backend"), std::string::npos);
}

// The public entry asks the real backend: here (CI has no GPU) cuda:all is a device error
// unless a GPU is present, and a list without cuda:all never asks.
TEST(DeviceList, PublicEntryExpandsWithoutOpeningDevices) {
  Result<Devices> listed = expand_device_list("cpu,sim");
  ASSERT_TRUE(listed.is_ok()) << listed.status().to_string();
  EXPECT_EQ(*listed, (Devices{"cpu", "sim"}));
  Result<Devices> all = expand_device_list("cuda:all");
  if (all.is_ok()) EXPECT_FALSE(all->empty());
  else EXPECT_EQ(all.status().code(), StatusCode::kDeviceError) << all.status().to_string();
}

}  // namespace
}  // namespace strider

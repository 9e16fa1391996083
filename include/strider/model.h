// Model: an ONNX model file imported once (its graph and weights), immutable, from which
// sessions are made (Session::create) and on which the float64 reference runs
// (strider/reference.h). Sessions made from one Model copy its graph (their passes edit
// it) but share its weights: the host tensors are reference-counted, never duplicated.
//
//   auto model = strider::Model::load("model.onnx");
//   for (const strider::ValueInfo& in : (*model)->inputs()) { ... }
//   auto session = strider::Session::create(**model, options);
//
// Thread safety: a Model is never changed after load(), so any number of threads may make
// sessions from it at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strider/session.h"

namespace strider {

class Model {
 public:
  struct Options {
    // The most bytes of weights the import may read (a hostile model declares terabytes);
    // 0: the default host budget (80% of physical memory).
    int64_t max_constant_bytes = 0;
  };
  // INVALID_MODEL / UNSUPPORTED / IO_ERROR naming what and where when the file is not a model
  // strider can import.
  static Result<std::shared_ptr<const Model>> load(const std::string& path, const Options& options);
  static Result<std::shared_ptr<const Model>> load(const std::string& path) { return load(path, Options()); }
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const std::string& path() const;
  // As the model declares them: dtypes, shapes with -1 for dynamic dims (named in dim_params).
  const std::vector<ValueInfo>& inputs() const;
  const std::vector<ValueInfo>& outputs() const;
  // The inputs whose values decide shapes (a Reshape's target, a Slice's bounds, Resize's
  // sizes): a session fixes shapes at creation, so it takes these as constant_inputs.
  const std::vector<std::string>& shape_inputs() const;

  struct Impl;  // private: src/exec/model_impl.h
  const Impl& impl() const { return *impl_; }
  explicit Model(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace strider

// The repository the serving fuzz targets (fuzz_serve_request, fuzz_grpc_request) send
// requests to: one small CNN with a dynamic batch dim, served as "cnn" (unbatched) and as
// "cnnb" (through the dynamic batcher, batches up to 4), on the CPU with one thread. Made
// once per process; a load failure aborts (the target would test nothing).
#pragma once

#include "model_repository.h"

namespace strider::fuzz {

serve::ModelRepository& served_cnn();

}  // namespace strider::fuzz

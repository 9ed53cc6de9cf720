// A program no compiled .smp can be (a device-varying branch runs both sides, so every device
// runs every collective): on rank 0 the devices run psum, on rank 1 pmax. Under mpirun with
// --check-collectives the job must stop with an error naming both ranks' collectives, not
// hang or mix them (tests/mpi/failures.py).
#include "ranks.h"
#include "shmap_runtime.h"

extern "C" {

static void body(shm_device *dev, void **, void **) {
  float x[4] = {1, 2, 3, 4}, y[4];
  const int32_t axes[1] = {0};
  const int64_t shape[1] = {4};
  if (shm::rank_id() == 0)
    shm_psum(dev, SHM_F32, x, y, 1, shape, axes, 1);
  else
    shm_pmax(dev, SHM_F32, x, y, 1, shape, axes, 1);
}

void shm_user_main(shm_device *, void **, void **) {
  const int64_t sizes[1] = {2};
  const char *const names[1] = {"i"};
  shm_run_shmap(1, sizes, names, body, 0, nullptr, nullptr, 0, nullptr, nullptr);
}

} // extern "C"

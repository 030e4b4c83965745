# The CUDA kernels' host-and-device headers (kernels/cuda), compiled here as C; their
# contract header (cuda_kernels.h) includes the toolkit's cuda_runtime_api.h for its
# types only: nothing of CUDA is linked or called.
find_package(CUDAToolkit REQUIRED)
target_include_directories(test_cuda_kernels_host PRIVATE ${PROJECT_SOURCE_DIR}/kernels/cuda
                           ${CUDAToolkit_INCLUDE_DIRS})

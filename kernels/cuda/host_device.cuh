/* kernels/cuda/host_device.cuh — CINFER_HD marks a function of the common subset of C
 * and CUDA C++ that runs on the device and on the host: the kernels call it, and host
 * tests without a GPU (compiled as C) call the very same code. */
#ifndef CINFER_CUDA_HOST_DEVICE_CUH
#define CINFER_CUDA_HOST_DEVICE_CUH

#ifdef __CUDACC__
#define CINFER_HD static inline __host__ __device__
#else
#define CINFER_HD static inline
#endif

#endif

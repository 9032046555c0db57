"""Settings every process we start on a GPU host must carry.

NVLink multicast (NVLS, multimem, cuMulticastCreate) can take a shared host's GPUs out of
service, so NCCL, PyTorch symmetric memory and NVSHMEM are all told never to use it.
"""

NO_MULTICAST_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}

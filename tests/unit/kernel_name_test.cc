// short_kernel_name: what reports print for a kernel's mangled name.
#include "common/kernel_name.h"

#include <gtest/gtest.h>

namespace tpserve {
namespace {

TEST(KernelName, DropsNamespacesTemplateArgumentsAndParameters) {
  EXPECT_EQ(short_kernel_name("_ZN7tpserve7kernels12_GLOBAL__N_111gemv_kernelILi1EEEvNS0_10GemvParamsE"),
            "gemv_kernel");
  // nvcc's anonymous namespace of a .cu file.
  EXPECT_EQ(short_kernel_name("_ZN7tpserve7kernels43_GLOBAL__N__8a1f09c3_10_rmsnorm_cu_992144c314rmsnorm_"
                              "kernelILb1ELi1EEEvNS0_13RmsNormParamsE"),
            "rmsnorm_kernel");
}

TEST(KernelName, KeepsWhatDoesNotDemangle) {
  EXPECT_EQ(short_kernel_name("sm90_xmma_gemm_bf16bf16"), "sm90_xmma_gemm_bf16bf16");
  EXPECT_EQ(short_kernel_name(nullptr), "?");
}

}  // namespace
}  // namespace tpserve

// GPU (ctest label "gpu"): a model loads onto CUDA in every dtype, with the CUDA non-finite check.
// Skips cleanly without a CUDA device.
#include <gtest/gtest.h>

#include "cutenative.h"
#include "tests/support/fixtures.h"

TEST(ModelLoadGpu, Chronos2OnCuda) {
    if (cn_cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    cn::test::TempDir d;
    cn::test::write_chronos2_checkpoint(d.path());
    for (int dt : {CN_DTYPE_F32, CN_DTYPE_BF16, CN_DTYPE_F16}) {
        SCOPED_TRACE(dt);
        cn_model_params p;
        cn_model_params_init(&p);
        p.device_type = CN_DEVICE_CUDA;
        p.dtype = dt;
        p.check_tensors = 1;
        cn_error* err = nullptr;
        cn_error_create(&err);
        cn_model* m = nullptr;
        ASSERT_EQ(cn_model_create(d.path().c_str(), &p, &m, err), CN_STATUS_OK) << cn_error_message(err);
        cn_model_info info;
        cn_model_info_init(&info);
        ASSERT_EQ(cn_model_get_info(m, &info, err), CN_STATUS_OK);
        EXPECT_EQ(info.device_type, CN_DEVICE_CUDA);
        EXPECT_EQ(info.dtype, dt);
        cn_model_free(m);
        cn_error_free(err);
    }
}

TEST(ModelLoadGpu, BadDeviceIndex) {
    if (cn_cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    cn::test::TempDir d;
    cn::test::write_chronos2_checkpoint(d.path());
    cn_model_params p;
    cn_model_params_init(&p);
    p.device_type = CN_DEVICE_CUDA;
    p.device_index = 64;
    cn_model* m = nullptr;
    EXPECT_EQ(cn_model_create(d.path().c_str(), &p, &m, nullptr), CN_STATUS_INVALID_ARGUMENT);
}

"""Op categories and short kernel names (``xlaprof.tables.device.categories``), on real kernel
names of the H100, gfx950 and TensorFlow GPU captures."""

from __future__ import annotations

from xlaprof.tables.device.categories import categorize, short_name


def test_kernel_names_are_short_and_categories_are_whole_words() -> None:
    # real kernel names of the H100, gfx950 and TensorFlow GPU captures
    eigen = (
        "void Eigen::internal::EigenMetaKernel<Eigen::TensorEvaluator<Eigen::TensorAssignOp<"
        "Eigen::TensorMap<Eigen::Tensor<float, 1, 1, long>, 16, Eigen::MakePointer>, "
        "Eigen::TensorConversionOp<float, Eigen::TensorMap<Eigen::Tensor<Eigen::half const, 1, "
        "1, long>, 16, Eigen::MakePointer> const> const> const, Eigen::GpuDevice>, long>("
        "Eigen::TensorEvaluator<X>, long)"
    )
    assert short_name(eigen) == "Eigen::internal::EigenMetaKernel"
    delay = (
        "stream_executor::gpu::(anonymous namespace)::DelayKernel(stream_executor::"
        "GpuSemaphoreState volatile*, stream_executor::GpuSemaphoreState)"
    )
    assert short_name(delay) == "stream_executor::gpu::(anonymous namespace)::DelayKernel"
    # a dtype conversion is not a convolution; a cuDNN convolution is
    assert categorize(None, eigen) != "matmul_conv"
    assert categorize(None, "wrapped_convert") != "matmul_conv"
    assert categorize(None, "cudnn-conv.1") == "matmul_conv"
    assert categorize(None, "void implicit_convolve_sgemm<float, float, 128>(int)") == (
        "matmul_conv"
    )
    # host<->device copies are transfers (input), not host offload
    assert categorize(None, "MemcpyH2D") == "host_transfer"
    assert categorize(None, "Memcpy HtoD (Pageable -> Device)", "gpu_memcpy") == "host_transfer"

"""The splash kernel's modelled counts against hand computations, and finding its calls in
a compiled program's text."""

import pytest

from activemem_jax.models.kernel_costs import causal_blocks, modelled_kernels, splash_cost, splash_tag


def test_causal_blocks_by_hand():
    # 1024 x 1024 in 512-blocks: the lower triangle and the diagonal, 3 of 4 blocks
    assert causal_blocks(1024, 1024, 512, 512, 0) == 3
    # 512 queries after 512 cached keys: query block 0 (slots 512..1023) sees both key blocks
    assert causal_blocks(512, 1024, 512, 512, 512) == 2
    # 8192 x 8192 in 512-blocks: 16 * 17 / 2
    assert causal_blocks(8192, 8192, 512, 512, 0) == 136
    # 256-query blocks against 512-key blocks: query block 0 needs key block 0 only, block 1 too
    assert causal_blocks(1024, 1024, 256, 512, 0) == 1 + 1 + 2 + 2


def test_splash_flops_and_bytes_by_hand():
    b, h, d, e = 2, 3, 64, 2
    tag = splash_tag(b, h, 1, 1024, 1024, d, e, 0)
    block = 2 * 512 * 512 * d  # one 512 x 512 x d matmul: 33.5 MFLOP
    fwd = splash_cost(tag, "fwd")
    assert fwd.flops == b * h * 3 * 2 * block == 1_207_959_552
    # per head: q and o rows once, a key and a value block for each of the 3 blocks run
    assert fwd.bytes == b * h * (1024 * d * e * 2 + 3 * 2 * 512 * d * e)
    assert splash_cost(tag, "fwd", residuals=True).bytes == fwd.bytes + b * h * 1024 * 4
    assert splash_cost(tag, "dq").flops == b * h * 3 * 3 * block
    assert splash_cost(tag, "dkv").flops == b * h * 3 * 4 * block
    # the blocks on the diagonal run whole: between the useful causal work and the dense one
    useful = b * h * 4 * d * 1024 * 1025 / 2
    assert useful < fwd.flops < b * h * 4 * d * 1024 * 1024
    # roofline: 1.2 GFLOP at 100 TFLOP/s against 2.4 MB at 1 TB/s
    assert fwd.seconds(100e12, 1e12) == pytest.approx(max(fwd.flops / 100e12, fwd.bytes / 1e12))
    with pytest.raises(ValueError, match="splash phase 'bwd'"):
        splash_cost(tag, "bwd")


HLO = '''
ENTRY %main {
  %p = bf16[2,1024,64]{2,1,0} parameter(0)
  %splash_mha_fwd_segmented_residuals.3 = (f32[2,512,128]{2,1,0}) custom-call(%p), custom_call_target="tpu_custom_call", frontend_attributes={kernel_metadata={
"xprof_metadata":"{\\"block_q\\": 512}"
}}, metadata={op_name="jit(f)/while/body/shard_map/SCOPE/vmap(static_sparsity_splash)/splash_mha_fwd_segmented_residuals/pallas_call"}
  %get-tuple-element.1 = f32[2,512,128]{2,1,0} get-tuple-element(%splash_mha_fwd_segmented_residuals.3), index=0, metadata={op_name="jit(f)/shard_map/SCOPE/splash_mha_fwd_segmented_residuals/pallas_call"}
  %splash_mha_dq_segmented_no_residuals.1 = (f32[2,512,64]{2,1,0}) custom-call(%p), custom_call_target="tpu_custom_call", metadata={op_name="jit(f)/transpose/SCOPE/splash_mha_dq_segmented_no_residuals/pallas_call"}
  %other = f32[2] custom-call(%p), custom_call_target="Sharding", metadata={op_name="jit(f)/SCOPE/sharding"}
  ROOT %t = (f32[2,512,64]{2,1,0}) tuple(%splash_mha_dq_segmented_no_residuals.1)
}
'''


def test_calls_found_in_compiled_text_once_each():
    tag = splash_tag(2, 2, 1, 1024, 1024, 64, 2, 0)
    found = modelled_kernels(HLO.replace("SCOPE", tag), 100e12, 1e12)
    assert found.calls == 2 and found.phases == {"fwd": 1, "dq": 1}  # not the get-tuple-element, nor "Sharding"
    fwd, dq = splash_cost(tag, "fwd", residuals=True), splash_cost(tag, "dq")
    assert found.flops == fwd.flops + dq.flops and found.bytes == fwd.bytes + dq.bytes
    assert found.seconds == pytest.approx(fwd.seconds(100e12, 1e12) + dq.seconds(100e12, 1e12))
    assert modelled_kernels(HLO.replace("SCOPE", "no_tag_here"), 100e12, 1e12).calls == 0

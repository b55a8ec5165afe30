// The precision `node serve.js` holds its weights and KV cache in: vLLM's and SGLang's --dtype and --kv-cache-dtype.
// A half dtype stores the served matrices in bf16/f16 (norms stay float32; there is no float32 copy: the server does
// not train) and decodes with the half-precision KV cache of actor_rollout_ref.rollout.dtype (models/kv-cache.ts):
// half the bytes a sequence, so about twice the sequences fit the memory budget. Arithmetic stays float32.
import type { FloatDType } from '../../engine/index.ts';
import { TORCH_DTYPE_STORAGE, type TorchDtype } from '../../models/hf-config.ts';

/** --dtype's values, as vLLM and SGLang spell them ("half" is float16, "float" float32). */
export const SERVE_DTYPES = ['auto', 'half', 'float16', 'bfloat16', 'float', 'float32'] as const;
export type ServeDtype = (typeof SERVE_DTYPES)[number];
/** --kv-cache-dtype's values that this server stores: vLLM's float16/bfloat16 and SGLang's bf16 spelling. */
export const KV_CACHE_DTYPES = ['auto', 'bfloat16', 'bf16', 'float16'] as const;
export type KvCacheDtype = (typeof KV_CACHE_DTYPES)[number];

const FROM_NAME: Readonly<Record<Exclude<ServeDtype | KvCacheDtype, 'auto'>, FloatDType>> = {
  half: 'f16',
  float16: 'f16',
  bfloat16: 'bf16',
  bf16: 'bf16',
  float: 'f32',
  float32: 'f32',
};
/** The name /get_model_info and /get_server_info report a dtype by (torch's, as SGLang reports them). */
export const TORCH_NAME: Readonly<Record<FloatDType, TorchDtype>> = {
  f32: 'float32',
  bf16: 'bfloat16',
  f16: 'float16',
};

/**
 * The weights' and the KV cache's storage. --dtype auto is the checkpoint's torch_dtype: a bf16 or f16 checkpoint is
 * served as stored, as vLLM does; a float32 one stays float32, where vLLM would serve it in its platform's half dtype
 * (here float32 decoding equals the trainer's forward, and the CPU device class's fastest decode paths are float32).
 * --kv-cache-dtype auto is the weights' dtype, as in vLLM and SGLang.
 */
export function servedDtypes(
  dtype: ServeDtype,
  kvCacheDtype: KvCacheDtype,
  checkpointDtype: TorchDtype,
): { weights: FloatDType; cache: FloatDType } {
  const weights = dtype === 'auto' ? TORCH_DTYPE_STORAGE[checkpointDtype] : FROM_NAME[dtype];
  return { weights, cache: kvCacheDtype === 'auto' ? weights : FROM_NAME[kvCacheDtype] };
}

"""A run-time fix of REAL fairseq 0.12.2 (no fairseq source is changed) without which its transformer_lm
never builds NormFormer: TransformerConfig.from_namespace copies the keys that are not TransformerConfig
fields (scale_fc, scale_attn, scale_heads, scale_resids among them) from vars(args), but transformer_lm
hands it an omegaconf DictConfig, whose vars() are _content/_metadata/_parent. So fairseq-train
--scale-* records the flags in the checkpoint's cfg and trains a plain model, and fairseq-eval-lm cannot
load a checkpoint that has the NormFormer tensors (strict load: unexpected keys). The fix copies those
keys from the DictConfig as from_namespace does from an argparse Namespace; the NormFormer code that then
runs (TransformerDecoderLayerBase's c_attn, attn_ln, ffn_layernorm, w_resid) is fairseq's own.
Used by fairseq_eval.py and fairseq_train.py when STRETCH_FAIRSEQ_NORMFORMER=1.
"""


def apply():
    from omegaconf import DictConfig
    from fairseq.models.transformer import transformer_config as tc

    original = tc.TransformerConfig.from_namespace.__func__

    def from_namespace(cls, args):
        config = original(cls, args)
        if isinstance(args, DictConfig) and config is not args:
            fields = {f.name for f in tc.fields(cls)}
            for key in args.keys():
                if key not in fields and not hasattr(config, key):
                    setattr(config, key, args[key])
        return config

    tc.TransformerConfig.from_namespace = classmethod(from_namespace)

"""stretch from Python: load a model file, score text or token ids with eval-lm's protocols, generate,
run a sweep, read and write weights under fairseq's state-dict names (docs/python.md).

    import stretch
    m = stretch.load("checkpoints/checkpoint_best.pt")
    r = m.score("the cat sat on the mat", tokens_per_sample=512)   # r["nll"]: float64 [N], nats
    print(r["loss"], r["ppl"])                                      # base 2, as eval-lm prints them

Everything runs the C++ code the `stretch` binary runs (python/stretch_module.cpp); errors are
stretch.Error (stretch.UsageError for bad arguments) with the binary's message.
"""
from ._stretch import Error, Model, UsageError, __version__, eval_lm, num_threads, set_threads, sweep


def load(path, model_overrides=None, data=""):
    """A model file, training checkpoint or fairseq .pt (imported in memory), ready to evaluate.

    model_overrides: a dict or eval-lm's text ("{'tokens_per_sample': 1024}"), with eval-lm's meaning.
    data: a data-bin directory whose dict.txt to use (needed for a fairseq .pt, which stores none).
    """
    return Model(path, model_overrides, data)


__all__ = ["Error", "Model", "UsageError", "__version__", "eval_lm", "load", "num_threads", "set_threads", "sweep"]

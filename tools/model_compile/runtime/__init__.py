"""Runtime probes: the only part of model-compile that imports torch.

Import `model_compile.runtime.dynamo_adapter` from inside a training process
(the recipe's skill asserts do); the CLI never imports it.
"""

RUNTIME_DIR_ENV = "MODEL_COMPILE_RUNTIME_DIR"
RUNTIME_SCHEMA = "model-compile-runtime/1"

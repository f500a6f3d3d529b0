"""demo_engine: a tiny recipe-based training engine used as the model-compile example.

It follows the layout of recipe-based multimodal training repositories (a model
kit, a distributed wrapper, an engine with named phases, recipe tests with
skill asserts) at a size that trains on a laptop CPU in milliseconds.
"""

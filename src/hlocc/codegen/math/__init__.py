"""The maths library the float passes expand into: approximations of transcendental functions
(approx_exp_log, approx_trig, approx_special, approx_complex) and narrow-float conversions
(float_conversions), each written once over the typed `FloatBuilder` (float_builder.py), which emits
kernel IR (float_builder_xdsl.py) or evaluates with numpy for the accuracy tests (float_builder_numpy.py).
No pass lives here: transforms/expand_float_ops.py and transforms/lower_narrow_floats.py apply it."""

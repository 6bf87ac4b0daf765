"""Staff tools around the product: ``doctor`` (can this machine grade?), ``demo`` (a class graded end to
end), ``gpu_check`` (the GPU checks against the references on a GPU) and ``tables`` (the settings tables
of docs/reference, generated).
"""

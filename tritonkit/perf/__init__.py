"""tritonkit.perf"""

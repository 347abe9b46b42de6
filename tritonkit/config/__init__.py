"""tritonkit.config"""

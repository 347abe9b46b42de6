"""tritonkit.deploy"""

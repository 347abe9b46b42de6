"""tritonkit.client"""

"""tritonkit.repository"""

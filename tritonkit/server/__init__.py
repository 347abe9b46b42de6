"""tritonkit.server"""

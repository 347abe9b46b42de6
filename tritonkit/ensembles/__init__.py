"""tritonkit.ensembles"""

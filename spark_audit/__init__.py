"""spark_audit"""

"""migrator/zk"""

"""zk_fixtures"""

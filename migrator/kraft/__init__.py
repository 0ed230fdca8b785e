"""migrator/kraft"""

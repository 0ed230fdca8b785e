"""migrator/migration"""

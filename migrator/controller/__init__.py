"""migrator/controller"""

"""state_machine"""

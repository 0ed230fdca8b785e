"""The socket server and its listeners: TCP and frames, listener configuration, the listener around the
service, the long-poll thread.
"""

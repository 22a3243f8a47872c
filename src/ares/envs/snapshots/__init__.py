"""What an environment's snapshot is made of (``model``, ``task_codec``) and how a restore gets its
sandbox and episode (``restoring``); ``ares.snapshot`` is the public face (``restore``)."""

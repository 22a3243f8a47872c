"""Adapters from ARES's async environments to other RL APIs (Gymnasium, dm_env).

``ares.wrappers.gym`` needs the ``gym`` extra (gymnasium), ``ares.wrappers.dm_env`` the ``dm``
extra (dm-env); importing this package needs neither.
"""

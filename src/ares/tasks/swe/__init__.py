"""SWE-bench-format repository tasks: instances in many dataset shapes, their images, clean issue texts.

Modules: ``instance`` (the one task model), ``formats`` (row shapes), ``load`` (files, saved
datasets, Hub names), ``images`` (image names and templates), ``statement`` (issue text cleaning),
``patches`` (reversing a bug diff into its fix), ``eval_script`` (the verifier's eval script and patch
apply cascade), ``grading`` (logs parsed and graded by the SWE-bench harness's own rules, via
``harness``), ``markers`` (the log markers both share); predictions: ``predictions`` (the harness's
predictions files), ``prediction_agent`` (applies one as an episode's agent) and ``eval_report`` (the
harness's report shapes); ``ares eval``, which grades them with the verifier, is the application
``ares.evaluation.swe``.
"""

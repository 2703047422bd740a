"""Plumbing shared by the numbered lessons: argument parsing, devices, paths, console, report.

Nothing in here is a lesson: the profiler set-up stays in the numbered scripts.
"""

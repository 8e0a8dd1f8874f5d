"""Latency under load (``rwb bench load SPEC``): closed and open loops, coordinated-omission-
correct percentiles (HdrHistogram), and the highest offered rate whose p99 meets an SLO.

Roles: :mod:`.spec` (the YAML spec) -> :mod:`.stats`, :mod:`.capacity` (pure: schedules, HDR
percentiles and correction, Little's law, the rate search) -> :mod:`.drivers`, :mod:`.procs`,
:mod:`.targets` (live: clients as threads / asyncio tasks / processes; any registered backend)
-> :mod:`.points` (THE point runner, :class:`~.points.LoadPointRunner`: a closed or open point,
searching while writing as its option) -> :mod:`.run` (the bench and its run directory) and
:mod:`.evidence` (capacity for exports).
"""

"""A reward term in one table entry: a penalty per evicted job (the preemptive env).

The entry below goes into ``REWARD_TERMS`` in ``hetsched/envs/rewards.py`` (docs/extending.md);
``StepStats.evicted`` already counts evictions, so no other file changes. The env then reports
``reward_evict`` in every info dict and takes its weight as ``reward_weights={"evict": w}``.
"""

from hetsched.envs.rewards import RewardTerm

EVICT = RewardTerm("evict", 0.0, lambda s, z: -float(s.evicted), "penalty per evicted job")

#: The line to add to the table (tests/test_extending.py inserts it into a copy of the package).
TABLE_LINE = (
    '    RewardTerm("evict", 0.0, lambda s, z: -float(s.evicted), "penalty per evicted job"),'
)

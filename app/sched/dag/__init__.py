"""DAG planning (algorithms.md §6): which resource service group runs each task of a workflow, and when."""

"""DAG planning (docs/methods.md §6): which resource service group runs each task of a workflow, and when."""

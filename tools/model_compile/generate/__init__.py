"""generate: the edits that add, switch or enable compile in a recipe, in four rooms.

- `planning/`: read the recipe and the options, decide every change in memory (`plan.build_plan`,
  `stage_switch.build_stage_plan`), refuse bad input, review the planned result;
- `edits/`: the edit of each file kind (engine via LibCST, schema, stage YAML, README, the recipe's
  tests) and the snippets rendered from templates/;
- `style/`: fitting the repository: its formatter settings, line length, launch and test commands,
  and the conventions of its sibling recipes;
- `writing/`: diffs, the dirty check and the all-or-nothing write (`transaction`).
"""

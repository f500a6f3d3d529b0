"""The hard-validation pipeline: the layers planned for a recipe (soft, structure, rehearsal, smoke, impact), run in
order, their JUnit results and refusals read, the verdict judged and rendered."""

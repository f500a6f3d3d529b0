# The fixture repositories hold recipe tests that the runner executes in
# subprocesses; they are not tests of this project.
collect_ignore_glob = ["fixtures/*"]

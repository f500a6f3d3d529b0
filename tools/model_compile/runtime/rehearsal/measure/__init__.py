"""What the rehearsal measures on the run: parity of the twins, the model's keys and compiled modules, what dynamo
did each micro-step, and which parts of the model ran compiled."""

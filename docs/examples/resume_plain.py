"""A plain DataLoader with workers: save the position the loop reached, not the workers'."""

import json

from torch.utils.data import DataLoader

from distsampling import DistributedSampler

data, BATCH = list(range(40)), 4
sampler = DistributedSampler(data, num_replicas=2, rank=0, seed=1)
sampler.set_epoch(5)
loader = DataLoader(data, batch_size=BATCH, sampler=sampler, num_workers=2)

for step, batch in enumerate(loader, start=1):
    batch.float().mean()  # the training step
    if step == 2:  # time to checkpoint: the workers have already prefetched further batches
        print("handed out to the workers:", sampler.state_dict()["position"])
        state = sampler.state_dict(consumed=step * BATCH)  # what the loop has consumed
        saved = json.dumps(state)
        print("saved position:", state["position"])
        break

resumed = DistributedSampler(data, num_replicas=2, rank=0, seed=1)
resumed.load_state_dict(json.loads(saved))
resumed.set_epoch(5)  # the loop's usual call: the loaded position survives its own epoch
print([b.tolist() for b in DataLoader(data, batch_size=BATCH, sampler=resumed)])

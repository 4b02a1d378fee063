"""A plain DataLoader with workers: save what the loop consumed, not what the workers fetched."""

import json

from torch.utils.data import DataLoader

from distsampling import ResumableDistributedSampler

data, BATCH = list(range(40)), 4


def make_sampler() -> ResumableDistributedSampler:
    return ResumableDistributedSampler(data, num_replicas=2, rank=0, seed=1)


sampler = make_sampler()
sampler.set_epoch(5)
loader = DataLoader(data, batch_size=BATCH, sampler=sampler, num_workers=2)

taken = 0  # samples the loop took from this iter() of the loader
for batch in loader:
    batch.float().mean()  # the training step
    taken += len(batch)
    if taken == 8:  # time to checkpoint: the workers have already fetched further batches
        print("handed out to the workers:", sampler.state_dict()["position"])
        state = sampler.state_dict(consumed=taken)  # what the loop has consumed
        saved = json.dumps(state)
        print("saved position:", state["position"])
        break

resumed = make_sampler()
resumed.load_state_dict(json.loads(saved))
resumed.set_epoch(5)  # the loop's usual call: the loaded position survives its own epoch
print([b.tolist() for b in DataLoader(data, batch_size=BATCH, sampler=resumed, num_workers=2)])

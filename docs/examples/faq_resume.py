from torchdata.stateful_dataloader import StatefulDataLoader

from distsampling import ResumableDistributedSampler

dataset = list(range(20))


def loader_for(epoch: int) -> StatefulDataLoader:
    # this rank's share, in the resumable form: the loader saves and loads its position
    sampler = ResumableDistributedSampler(dataset, num_replicas=2, rank=0, seed=0)
    sampler.set_epoch(epoch)
    return StatefulDataLoader(dataset, batch_size=2, sampler=sampler)


full = [b.tolist() for b in loader_for(epoch=1)]  # the uninterrupted epoch 1
loader = loader_for(epoch=1)
batches = iter(loader)
before = [next(batches).tolist() for _ in range(2)]  # two steps, then the job stops
state = loader.state_dict()  # saved with the model's checkpoint
resumed = loader_for(epoch=1)  # the restarted job: the same sampler, the same epoch
resumed.load_state_dict(state)
after = [b.tolist() for b in resumed]
print("before the stop:", before)
print("after resuming: ", after)
print("the same as the uninterrupted epoch:", before + after == full)

"""Every iter() of a resumed epoch starts where the checkpoint was taken."""

from torch.utils.data import DataLoader

from distsampling import ResumableDistributedSampler

data = list(range(12))


def make_sampler() -> ResumableDistributedSampler:
    return ResumableDistributedSampler(data, num_replicas=1, rank=0, seed=0)


uninterrupted = list(make_sampler())
sampler = make_sampler()
it = iter(sampler)
trained = [next(it) for _ in range(8)]  # 8 of 12 samples trained, then preempted
checkpoint = sampler.state_dict()

resumed = make_sampler()
resumed.load_state_dict(checkpoint)
# batch_size=None with workers: this DataLoader calls iter(sampler) twice per epoch
loader = DataLoader(data, batch_size=None, sampler=resumed, num_workers=2)
print("peeked before the epoch:", next(iter(loader)))  # a shape check, say
rest = list(loader)
print("the epoch's rest:", rest)
print("trained + rest == uninterrupted:", trained + rest == uninterrupted)

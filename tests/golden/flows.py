"""The current code the golden histories are replayed against."""

from workflows import Loop, queue, setup, workflow


async def _lookup(step):
    return {"company": step.input}


async def brief(ctx):
    msg = await ctx.queue.next("wait-start", names=["start"])
    companies = await ctx.step("extract", lambda s: msg.body["companies"])

    async def enrich_all(c):
        branches = {}
        for i, name in enumerate(companies):

            async def enrich(b, i=i, name=name):
                return await b.step(f"enrich-{i}", _lookup, input=name)

            branches[str(i)] = enrich
        return await c.join("enrich", branches)

    crm = await enrich_all(ctx)

    async def poll(c, state):
        done = await c.step("check", lambda s: state["n"] >= 2)
        return Loop.done(state["n"]) if done else Loop.next({"n": state["n"] + 1})

    polls = await ctx.loop("poll", poll, state={"n": 0}, history_size=5)
    await ctx.queue.next("wait-approval", names=["approve"])
    return await ctx.step("publish", lambda s: {"crm": crm, "polls": polls})


registry = setup(use={"brief": workflow(brief, queues={"start": queue(), "approve": queue()})})

-- everynode's health check for apps/v1 DaemonSets in Argo CD: the value of the key
-- resource.customizations.health.apps_DaemonSet in the argocd-cm ConfigMap (see
-- docs/gitops.md). Argo CD runs it in its Lua sandbox, which has no string or math
-- library; obj is the DaemonSet, and the table returned is its health.
--
-- A DaemonSet whose rollout everynode drives carries the conditions Reconciling and
-- Stalled beside Progressing, kept up to date in every status write:
--   Stalled True (failed, rolled back, or held until a fix)  -> Degraded
--   Reconciling True, held until someone acts (paused, canary waiting for promotion,
--   partition)                                               -> Suspended
--   Reconciling True otherwise                               -> Progressing
--   Reconciling False, every pod updated and available       -> Healthy
-- Any other DaemonSet gets the verdict of Argo CD's built-in check, word for word.

local hs = {}
local meta = obj.metadata or {}
local spec = obj.spec or {}
local status = obj.status or {}

-- count reads a status counter; the API server leaves out those that are zero.
local function count(v)
  if v == nil then
    return 0
  end
  return v
end

local function condition(kind)
  for _, c in ipairs(status.conditions or {}) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local desired = count(status.desiredNumberScheduled)
local updated = count(status.updatedNumberScheduled)
local available = count(status.numberAvailable)

-- The template changed and no controller has looked at it yet.
if count(meta.generation) > count(status.observedGeneration) then
  hs.status = "Progressing"
  hs.message = "Waiting for rollout to finish: observed daemon set generation less than desired generation"
  return hs
end

local reconciling = condition("Reconciling")
local stalled = condition("Stalled")
if reconciling ~= nil and stalled ~= nil then
  local heldUntilActedOn = { Paused = true, WaitingForPromotion = true, PartitionHeld = true }
  if stalled.status == "True" then
    hs.status = "Degraded"
    hs.message = stalled.message
    return hs
  end
  if reconciling.status == "True" then
    if heldUntilActedOn[reconciling.reason] then
      hs.status = "Suspended"
    else
      hs.status = "Progressing"
    end
    hs.message = reconciling.message
    return hs
  end
  -- Done as everynode last saw it; the counters show any change it has not seen yet
  -- (a new template counted by another controller, a node that just joined).
  if updated < desired or available < desired then
    hs.status = "Progressing"
    hs.message = "Waiting for everynode: " .. updated .. " of " .. desired .. " pods updated, " .. available .. " available"
    return hs
  end
  hs.status = "Healthy"
  hs.message = reconciling.message
  return hs
end

-- Argo CD's built-in check.
if spec.updateStrategy ~= nil and spec.updateStrategy.type == "OnDelete" then
  hs.status = "Healthy"
  hs.message = "daemon set " .. updated .. " out of " .. desired .. " new pods have been updated"
  return hs
end
if updated < desired then
  hs.status = "Progressing"
  hs.message = "Waiting for daemon set \"" .. (meta.name or "") .. "\" rollout to finish: " .. updated .. " out of " .. desired .. " new pods have been updated..."
  return hs
end
if available < desired then
  hs.status = "Progressing"
  hs.message = "Waiting for daemon set \"" .. (meta.name or "") .. "\" rollout to finish: " .. available .. " of " .. desired .. " updated pods are available..."
  return hs
end
hs.status = "Healthy"
return hs

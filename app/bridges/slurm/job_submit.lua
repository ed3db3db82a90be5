-- hpcsched's job_submit plugin: while the bridge runs, Slurm starts nothing on its own.
--
-- Every new job is held at submission (priority 0, or parked in a down partition: PARK below) and
-- marked in its admin comment; the bridge (`hpcsched slurm run`) releases a marked job only once
-- the service has chosen its nodes.
-- A job submitted held (`sbatch --hold`) gets no mark: the bridge leaves it alone until an
-- administrator hands it over (`scontrol update JobId=N AdminComment=hpcsched:held`).
-- Users may not hold or release jobs afterwards (the bridge could not tell their hold from its
-- own); to delay a job, they set its begin time (`scontrol update JobId=N BeginTime=...`).
--
-- Fail-safe: the bridge writes the time of its last completed cycle (epoch seconds) to HEARTBEAT.
-- When that file is missing, unreadable or older than GRACE_S seconds, this plugin holds nothing
-- and lets users hold and release: Slurm schedules new jobs itself. `hpcsched slurm watchdog`
-- hands back the jobs already held. HEARTBEAT = "" turns the fail-safe off (every job is held).
--
-- Install: `hpcsched slurm recipe --heartbeat PATH --grace S --install /etc/slurm/job_submit.lua`
-- (beside slurm.conf), set `JobSubmitPlugins=lua` in slurm.conf, `scontrol reconfigure`.
-- See docs/slurm-failsafe.md.

local HEARTBEAT = "/var/lib/hpcsched/heartbeat"
local GRACE_S = 300
-- PARK = "" holds new jobs at priority 0. PARK = a partition of every node with State=DOWN parks
-- them there instead: pending (PartitionDown), keeping Slurm's multifactor priority (sprio), which
-- the bridge sends to the service; the mark keeps the partition(s) the job asked for.
local PARK = ""

local MARK = "hpcsched:held"
local INFINITE = 4294967295

-- true while the bridge has completed a cycle within the grace
local function bridge_alive()
   if HEARTBEAT == "" then
      return true
   end
   local f = io.open(HEARTBEAT, "r")
   if f == nil then
      return false
   end
   local beat = f:read("*n")
   f:close()
   return beat ~= nil and os.time() - beat <= GRACE_S
end

local function default_partition(part_list)
   for name, part in pairs(part_list) do
      if part.flag_default == 1 then
         return name
      end
   end
   return nil
end

function slurm_job_submit(job_desc, part_list, submit_uid)
   if not bridge_alive() or job_desc.priority == 0 then
      return slurm.SUCCESS
   end
   local home = job_desc.partition or default_partition(part_list)
   if PARK ~= "" and home ~= nil then
      job_desc.admin_comment = MARK .. " partition=" .. home .. " park=" .. PARK
      job_desc.partition = PARK
   else
      job_desc.admin_comment = MARK
      job_desc.priority = 0
   end
   return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
   if modify_uid == 0 or not bridge_alive() then
      return slurm.SUCCESS
   end
   if PARK ~= "" and job_rec.partition == PARK and job_desc.partition ~= nil then
      slurm.log_user("this job waits for hpcsched in partition " .. PARK .. ": its partition is not "
                     .. "yours to change while it waits")
      return slurm.ERROR
   end
   if job_desc.priority == 0 or job_desc.priority == INFINITE then
      slurm.log_user("jobs start when hpcsched starts them: hold and release are not yours; "
                     .. "set BeginTime to delay a job")
      return slurm.ERROR
   end
   return slurm.SUCCESS
end

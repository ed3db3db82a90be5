-- hpcsched's job_submit plugin: Slurm starts nothing on its own.
--
-- Every new job is held at submission (priority 0) and marked in its admin comment; the bridge
-- (`hpcsched slurm run`) releases a marked job only once the service has chosen its nodes.
-- A job submitted held (`sbatch --hold`) gets no mark: the bridge leaves it alone until an
-- administrator hands it over (`scontrol update JobId=N AdminComment=hpcsched:held`).
-- Users may not hold or release jobs afterwards (the bridge could not tell their hold from its
-- own); to delay a job, they set its begin time (`scontrol update JobId=N BeginTime=...`).
--
-- Install: copy beside slurm.conf, set `JobSubmitPlugins=lua` in slurm.conf, `scontrol reconfigure`.

local MARK = "hpcsched:held"
local INFINITE = 4294967295

function slurm_job_submit(job_desc, part_list, submit_uid)
   if job_desc.priority ~= 0 then
      job_desc.admin_comment = MARK
   end
   job_desc.priority = 0
   return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
   if modify_uid == 0 then
      return slurm.SUCCESS
   end
   if job_desc.priority == 0 or job_desc.priority == INFINITE then
      slurm.log_user("jobs start when hpcsched starts them: hold and release are not yours; "
                     .. "set BeginTime to delay a job")
      return slurm.ERROR
   end
   return slurm.SUCCESS
end
